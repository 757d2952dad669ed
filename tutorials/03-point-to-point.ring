# Point to point: blocking and immediate send/recv, with timings.
# Play it with `play point-to-point` (pause waits for Enter), `play point-to-point auto` or `... step`.

say "Point-to-point communication moves data from one rank to one other: the sender names the destination, the receiver names the source, and both agree on the type and the size. It comes in two kinds. A blocking send or receive returns only when its side of the transfer is done. An immediate one (isend, irecv) returns at once with a request, and the program waits on the request when it needs the data."
say "The lecture's example: each rank makes a 2x2 tensor of zeros; rank 0 adds one and sends it, rank 1 receives into its own tensor. Rank 1's code never writes a one, yet it ends up holding ones. `p2p` runs that exchange blocking, then immediate with a wait, then times the ways of sending."
set threads=1
p2p ranks=2 size=64K
expect rank 0 = [1, 1, 1, 1]
expect rank 1 = [1, 1, 1, 1]
expect rank 1 idata = [1, 1, 1, 1]
expect bytes = 65536
expect wrong = 0
pause

say "The timings. A blocking ping-pong measures one message's trip. isend and irecv in both directions at once let the two transfers share the time. Then each rank computes for about as long as a round trip while a message is on its way: blocking means sending first and computing after; immediate means posting the send, computing, and waiting."
say "Every one of the last three lines takes at least the computation's time, since each rank computes for it whatever the sending does:"
expect blocking_us >= compute_us
expect isend_us >= compute_us
expect isend_test_us >= compute_us
say "Now compare the last three lines on your screen: which one is fastest depends on the machine, and the reason is the catch. A library without a thread of its own moves data only inside its calls, so an isend followed by plain computation may barely move before the wait. Calling test() during the computation gives the data chances to move, but each call costs time too, and a chance is only taken when the other rank is inside a call at that moment. If the test() line is the fastest on your screen, the chances paid off. If it is the slowest, the calls cost more than they moved: on a machine whose cores are busy with other work the two ranks rarely run at the same moment. MPI behaves the same way; its remedy is a progress thread, which needs a core of its own."
pause

say "The same over TCP sockets instead of shared memory: the ranks could now be on different machines. The data arrives the same; the time per message is usually longer, since every byte goes through the kernel's network stack."
p2p ranks=2 size=64K backend=tcp
expect rank 1 = [1, 1, 1, 1]
expect wrong = 0
expect bytes = 65536
say "A bigger message shows the bandwidth more than the fixed cost per message:"
p2p ranks=2 size=4M
expect bytes = 4194304
expect rank 1 idata = [1, 1, 1, 1]
say "Collectives are built from such transfers; `play collective-ops` shows how."
