# Compile: a trained CNN as fp32, bf16 and int8 plans.
# Play it with `play compile` (pause waits for Enter), `play compile auto` or `... step`. It writes
# cnn.onnx, c32.plan, c16.plan and c8.plan (and c8e.plan) in the current folder.

say "Training needs every activation kept for backward, a gradient per weight and an optimizer; inference needs none of it. An inference compiler (TensorRT for NVIDIA GPUs, here ringside's compile on oneDNN for this CPU) takes the trained graph, rewrites it for running only, picks kernels, layouts and a precision, plans the memory, and writes one file a runtime loads. First a small CNN trained for one epoch and exported to ONNX, as you would hand it to such a compiler."
set threads=1 seed=1
data d = digits n=6000
model c = seq conv(8,3,pad=1) relu maxpool(2) conv(16,3,pad=1) relu maxpool(2) flatten linear(10)
train c on d epochs=1 batch=32 lr=0.003 eval=off view=off
export c cnn.onnx
pause

say "compile reads the ONNX file through the importer: 8 nodes (two convolutions, two relus, two pools, a flatten, a linear). The flatten is a view: it only renames the memory, so it runs no code. Each relu right after a convolution becomes a post-op of that convolution: oneDNN applies it to each output while it is still in a register, so the activation costs no pass over memory and no buffer of its own."
compile cnn.onnx batch=64 -> c32.plan
expect nodes_before = 8
expect nodes_after = 5
expect fusions = 2
say "For a 3x3 convolution over enough channels (16 on this CPU) compile also times oneDNN's Winograd kernels (fewer multiplies, more memory traffic) against the direct one: at the plan's batch, at batch 1, and the batch-1 kernel run once per sample, keeps the fastest and prints a line saying by how much. This CNN's convolutions read 1 and 8 channels, too few: compile a model with conv(32,3,pad=1) after a first conv to see the lines."
say "Every value of a run lives in one arena. A value's bytes are free again once its last reader has run, so the memory plan gives them to a later value; without reuse each value would need its own. The peak with reuse is what the machine must hold:"
expect arena_bytes < naive_bytes
pause

say "plan show reads the file back as a runtime would: the ISA and oneDNN version it was built for (a file built for another is refused), each node with its kernel, post-ops and precision, and the memory plan: where each value sits in the arena and from which node to which it is alive."
plan show c32.plan
expect nodes = 5
expect batch = 64
pause

say "The compiled plan as a model: eval runs it on the test part. It computes the same function as the engine (within rounding: oneDNN adds in another order), so the accuracy is the same."
eval c on d
model p32 = plan c32.plan
eval p32 on d
pause

say "bf16 keeps fp32's exponent and 8 bits of mantissa: half the bytes per weight and per input, and CPUs with AVX-512 BF16 multiply them natively, adding in fp32. Nothing to calibrate: the range is fp32's. Where oneDNN has no bf16 kernel for a node on this CPU (on AVX2 it has none), compile keeps that node fp32 and its report names it: the plan says what really runs."
compile cnn.onnx precision=bf16 batch=64 -> c16.plan
model p16 = plan c16.plan
eval p16 on d
pause

say "int8 has 255 levels, so each tensor needs a scale: x_q = round(x * 127 / t), with t the largest |x| that matters. Weights are known: a scale per output channel from their own maximum. Activations depend on the input, so compile runs an fp32 plan over calibration samples (here 512 training images) and picks t for each convolution's and linear's input. minmax takes the largest |x| seen. compile then evaluates the int8 plan on the test part beside the fp32 model."
compile cnn.onnx precision=int8 calib=d calib_n=512 batch=64 -> c8.plan
say "The accuracy int8 costs, in points, on the test part: well under half a point."
expect accuracy_drop < 0.5
expect accuracy ~= fp32_accuracy within 0.005
pause

say "One large value makes minmax spread the 127 levels thin over a range the rest never uses. TensorRT's default, entropy calibration, histograms |x| and picks the t whose clipped, 128-level version of the histogram is closest to the original (least KL divergence); percentile keeps a percent of the values (calib_pct=99.99) and clips the rest. Here the inputs are images in [0, 1] and the activations of a trained CNN, with no outliers: entropy loses no more than minmax did."
compile cnn.onnx precision=int8 calib=d calib_method=entropy batch=64 -> c8e.plan
expect accuracy_drop < 0.5
pause

say "Speed: plan bench runs each plan at batch 1 and at its batch, median of many runs. bench/plan.sh runs ONNX Runtime beside the plans on the same cnn.onnx, ORT's own int8 too. Timings vary with the machine's load, so no check is made on them: read the ratios."
plan bench c32.plan runs=20
plan bench c16.plan runs=20
plan bench c8.plan runs=20
say "Try compile c (the session model, no ONNX), a gpt model, batch=1 for latency, or compile ... precision=int8 calib=d calib_method=percentile calib_pct=99.9."
