# Devices: torch.cuda, model.to and where a model's memory lives.
# Play it with `play devices` (pause waits for Enter), `play devices auto` or `... step`. It runs the
# same on a machine with GPUs and without: what needs a GPU is refused with the reason, not hidden.

say "Before anything else, a PyTorch program asks torch.cuda.is_available(), and on a laptop the lecture's first example prints 'CUDA not available, using CPU'. `devices` asks the CUDA runtime the same questions: is CUDA there, how many GPUs, their names, memory and compute capability, the driver and runtime versions."
set threads=1 seed=1
devices
expect gpus >= 0
say "Where there is no GPU, it says why (no driver, no device, or a build without CUDA), and `set device=cuda` or `to m cuda` are refused with that reason: the session and the model stay where they were."
pause

say "A model lives on one device: its weights, its gradients, the activations a pass keeps for backward and the optimizer's state are all in that device's memory. torch moves one with model.to(device); here it is `to`. What comes from outside, a batch of inputs and its labels, is copied in for every step, and what the program reads back (the outputs, the losses) is copied out."
data d = digits n=3000
model m = mlp 784-64-10
expect params = 50890
say "To see that without a GPU, ringside has a test device, guard: the CPU's kernels, on memory that is sealed between kernel calls. Host code that read a weight directly, as code written only for the CPU does, would crash on the spot; a kernel handed a host buffer instead of device memory is refused, as a GPU kernel would fault."
to m guard
expect memory.params = copied_bytes
say "The parameter pool is measured at the allocator: the guard's blocks now hold the weights (the padding between tensors included, which is why it is a little more than 4 bytes a parameter), and the CPU's were given back."
pause

train m on d epochs=2 batch=32 view=off
expect accuracy ~= 0.886 within 0.02
say "Those two epochs ran on the guard: each batch copied in, the logits and the losses copied out, everything else stayed on the device. The arithmetic is the CPU's, so the result is the CPU's to the last bit (the test suite trains both side by side and compares every weight). Checkpoints, `save` and `export` read the weights back through host memory the same way."
to m cpu
eval m on d
expect accuracy ~= 0.886 within 0.02
expect samples = 500
say "Back on the CPU, the same accuracy: the weights made the round trip unchanged."
pause

say "Ranks on GPUs: torchrun gives each process a LOCAL_RANK, and each calls torch.cuda.set_device(local_rank). With backend=nccl ringside's ranks do the same, GPU LOCAL_RANK modulo the number of GPUs, and mode=ddp trains each rank's model there. NCCL wants one GPU per rank: two ranks of one group on the same GPU are refused ('Duplicate GPU detected'). With fewer GPUs than ranks, the ranks share the host through shm or tcp instead, as `backends` says at its end."
backends
expect backends = 4
