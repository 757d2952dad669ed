# Serving: a model behind a Triton-compatible server, requests merged by a dynamic batcher, a GPT
# streaming its tokens, and a model served across ranks. Play it with `play serve` (pause waits for
# Enter), `play serve auto` or `play serve step`.

say "Training is half the story: a model is then served, answering requests from clients over the network. `serve` puts a session model behind a server that Triton's own clients talk to (KServe v2 over HTTP, gRPC, Prometheus metrics). Ports 0 pick free ones."
set threads=1
model c = seq in=1x8x8 conv(8,3,pad=1) relu maxpool(2) flatten linear(10) seed=1
serve c http=0 grpc=0 metrics=0 max_batch=16 delay=50ms
say "`infer` sends requests into the server the way its HTTP and gRPC front ends do. Sixteen clients send 64 requests of one sample at once: the dynamic batcher waits up to delay= for more requests and runs what it gathered as one batch, up to max_batch=, so 64 requests take far fewer model executions. Each answer is checked against the session model run alone on that request's input."
infer c n=64 clients=16
expect ok = 64
expect batches < 64
expect max_diff < 1e-5
say "`serve` shows the counters Triton's statistics report, the latency percentiles from the histogram the metrics port exports, and how many batches of each size ran:"
serve
say "`view serve` shows the same figures in the dashboard's serve pane, redrawn four times a second while clients send requests (point tritonclient or perf_analyzer at the port and watch the batcher merge them), the batches drawn as a histogram by size; any key leaves. Without a terminal it prints one frame."
view serve
pause

say "One client waiting for each answer before the next leaves the batcher nothing to merge: every request runs alone, after waiting the whole delay for company. That is the trade dynamic batching makes: throughput under load for a little latency when idle."
infer c n=8 clients=1
expect batches = 8
expect mean_batch = 1
serve stop
pause

say "A compiled plan (tutorial 14, docs/plan.md) is served the same way: `serve` writes it as NAME/1/model.plan with platform ringside_plan, each instance runs a plan of its own, and batches go up to the batch it was compiled for (max_batch= above it is refused). `serve FILE.plan` works too."
compile c batch=16 -> c.plan
model p = plan c.plan
serve p http=0 grpc=-1 metrics=-1 delay=50ms instances=2
infer p n=32 clients=16
expect ok = 32
expect batches < 32
expect max_diff < 1e-5
serve stop
pause

say "A GPT is served decoupled: one request, and a response for every token as soon as it is drawn (gRPC ModelStreamInfer, or server-sent events from HTTP generate_stream). Train a small one on the built-in text first."
data t = text ctx=32
model g = gpt layers=1 heads=2 dim=32 ctx=32 seed=1
train g on t steps=500 view=off
serve g http=0 grpc=0 metrics=0 data=t
infer g prompt="The " tokens=60 seed=3
expect tokens = 60
serve stop
pause

say "A model too large for one device is served by several rank processes, as TorchServe's large-model inference does: here two pipeline stages, rank 0 running the first layers and rank 1 the rest. The server hands each request to rank 0, the activations go on to rank 1, and the output comes back. The answer is the one a single process gives: the same 60 characters for the same seed."
serve g ranks=2 mode=pipeline http=0 grpc=-1 metrics=-1 data=t
serve
infer g prompt="The " tokens=60 seed=3
expect tokens = 60
serve stop
say "Try mode=tensor (each rank holds half of every attention and MLP layer, one all-reduce per pair), or serve the CNN and point tritonclient or curl at the port `serve` printed."
