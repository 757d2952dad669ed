# A tour: models, data, training, ranks, a GPT, ONNX.
# Play it with `play tour` (pause waits for Enter), `play tour auto` (no waiting) or `play tour step`
# (asks before each command). Every line is a command you can type yourself; `expect` lines check that
# the numbers on screen are the ones the narration talks about.

say "Welcome to ringside, a workbench for learning how deep learning is trained: in one process, or in many rank processes that talk through real collectives. Each line of this tour is a command you could type yourself."
say "So that your numbers match your neighbour's, the tour runs on one thread with a fixed seed. It puts your own settings back when it ends."
set threads=1 seed=1
pause

say "First a model. An MLP (multi-layer perceptron) is layers of weights with a non-linearity between them. 784-256-10 reads: 784 inputs (a 28 by 28 image), 256 hidden units, 10 outputs, one per digit."
model m = mlp 784-256-10
say "`show` gives each layer, the shape it outputs and the parameters it holds. Count them yourself: 784 x 256 weights plus 256 biases, then 256 x 10 plus 10, which is 203,530."
show m
expect params = 203530
pause

say "Next, data. ringside draws its own handwritten-style digits, so nothing is downloaded. We ask for 6000 training images; a sixth as many, 1000, are kept aside to test on."
data d = digits n=6000
expect train = 6000
expect test = 1000
say "The ten digits come in equal numbers, so a blind guess is right 10% of the time: that is the bar to beat."
pause

say "Training: one epoch (one pass over the 6000 images) in batches of 64, which is 94 steps. Watch the loss fall, then the accuracy on the 1000 test images the model never saw."
train m on d epochs=1
expect steps = 94
expect accuracy > 0.8
say "`predict` shows a few test images as text, with what the model answers and the true label."
predict m on d n=4
pause

say "Images have a shape, and a convolutional network uses it: small filters slide over the picture, pooling halves its size, and a last linear layer picks the digit."
model c = seq conv(8,3,pad=1) relu maxpool(2) conv(16,3,pad=1) relu maxpool(2) flatten linear(10)
expect params = 9098
say "About 9 thousand parameters against the MLP's 203 thousand: each filter is reused all over the image. It does more arithmetic per image, though, so its epoch takes longer."
train c on d epochs=1
expect accuracy > 0.7
pause

say "Every command and every run goes into the session log, an ordinary SQLite file. `runs` lists the runs; `compare` sets two side by side. In a fresh log runs 1 and 2 are the two you just trained; in an older one, take the numbers from the `runs` table."
runs n=5
compare 1 2
say "The log answers SQL too (read-only): here the MLP's loss every 20 steps of its latest run."
sql "select step, round(value, 4) as loss from metrics where name = 'loss' and step % 20 = 0 and run_id = (select max(id) from runs where model = 'm' and kind = 'train') order by step"
pause

say "Weights worth keeping are saved as safetensors, a file PyTorch and NumPy read as well. Loading them back and evaluating gives the accuracy training ended with."
save m tour-mlp.safetensors
load m tour-mlp.safetensors
eval m on d
expect accuracy > 0.8
pause

say "Now the same MLP across two processes. Each process is a rank, numbered from 0; how many there are is the world size. With DistributedDataParallel (ddp) every rank holds the whole model, trains on half of each batch, and the ranks average their gradients with an all-reduce after every step, so they end with the same weights one process would have."
model m2 = mlp 784-256-10
train m2 on d mode=ddp ranks=2 epochs=1
expect world = 2
expect steps = 94
say "The table is each rank's memory, measured at the allocator and set beside the ZeRO paper's formula: under ddp every rank holds all the parameters, all the gradients and all the optimizer state (Adam keeps two numbers per parameter)."
expect memory.parameters per rank ~= formula within 1%
expect memory.optimizer per rank ~= formula within 1%
say "`play ranks` is about ranks and the world; `play collectives` and the tutorials after it show the all-reduce itself, step by step."
pause

say "Text works too. This GPT is a small transformer, the model behind nanoGPT, that learns which character comes next; 600 steps of training take a few seconds here."
data t = text ctx=32
model g = gpt layers=2 heads=2 dim=48 ctx=32
train g on t steps=600
expect val_loss < 2.2
say "`generate` samples from it one character at a time. After so little training it spells like English without quite writing it; the loss says how far it has come (a blind guess among 50 characters scores ln 50, about 3.9)."
generate g prompt="The " n=120
pause

say "Last, ONNX, the open format other tools read. `export` writes the MLP as an ONNX graph, `onnx check` runs the format's checks, and a model read back from the file evaluates to the same accuracy."
export m tour-mlp.onnx
onnx check tour-mlp.onnx
model back = onnx tour-mlp.onnx
eval back on d
expect accuracy > 0.8
pause

say "That was the tour. `play` lists the tutorials; `help` lists the commands, and `help train` shows every option of one. Try changing one: `train m on d epochs=2 lr=0.01 opt=sgd`."
play
