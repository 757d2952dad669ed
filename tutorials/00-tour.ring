# A three-minute tour of ringside: what exists so far.
# Play it with `play tour` (pause waits for Enter), `play tour auto` (no waiting) or
# `play tour step` (asks before each command). Every line is a command you can type yourself.

say "Welcome to ringside, a workbench for learning how deep learning is trained, in one process or across many rank processes that talk through real collectives. Everything you see in this tour is a command you can type yourself."
say "Numbers are easier to talk about when they come out the same every time, so this tour trains on one thread with a fixed seed: your screen will match your neighbour's. Afterwards, `set threads=4` (or however many cores you have) gives the speed back."
set threads=1 seed=1
pause

say "First, a model. An MLP (a multi-layer perceptron) is the simplest network: layers of weights with a non-linearity between them. 784-256-10 means 784 inputs (a 28 by 28 image), 256 hidden units and 10 outputs, one per digit."
model m = mlp 784-256-10
say "`show` lists the layers, the shape of each layer's output and how many parameters it holds. Almost all of them sit in the first layer."
show m
pause

say "Next, data. ringside carries its own handwritten-style digits, so nothing needs downloading. We take 6000 training images; a sixth as many are kept aside for testing."
data d = digits n=6000
show d
say "Each of the ten digits has the same number of samples, so guessing scores about 10%: that is the bar to beat."
pause

say "Now we train: one epoch, that is one pass over the training images, in batches of 64. Watch the loss fall, then the accuracy on the test images the model never trained on."
train m on d epochs=1
say "`predict` draws a few test images and prints what the model thinks each one is, next to the true label."
predict m on d n=4
pause

say "Images have shape, and a convolutional network (a CNN) uses it: small filters slide over the picture, pooling halves its size, and a final linear layer picks the class. `seq` lists the layers in order."
model c = seq conv(8,3,pad=1) relu maxpool(2) conv(16,3,pad=1) relu maxpool(2) flatten linear(10)
show c
say "Compare the two tables: the CNN has about 9 thousand parameters where the MLP has over 200 thousand, because each small filter is reused all over the image. It does more arithmetic per image, so its epoch takes a little longer."
train c on d epochs=1
pause

say "Every command and every run goes into the session log, an ordinary SQLite file. `runs` lists the runs of this log, and `compare` puts two of them side by side: their settings, then their results. In a fresh log, runs 1 and 2 are the two you just trained; if your log is older, pick the numbers from the `runs` table."
runs n=5
compare 1 2
say "You can ask the log anything with SQL, read-only. Here: how the MLP's loss fell, every 20 steps of its latest run."
sql "select step, round(value, 4) as loss from metrics where name = 'loss' and step % 20 = 0 and run_id = (select max(id) from runs where model = 'm' and kind = 'train') order by step"
pause

say "Trained weights are worth keeping. `save` writes them as safetensors, a format PyTorch and NumPy read too, and `load` reads them back. `eval` then finds the same test accuracy as at the end of training."
save m tour-mlp.safetensors
load m tour-mlp.safetensors
eval m on d
pause

say "The same model trains across many processes: `train m on d mode=ddp ranks=2` starts two. Each process is a rank, numbered from 0, and the number of ranks is the world size. With data parallelism every rank holds a copy of the model, trains on its own slice of each batch, and the ranks average their gradients with an all-reduce after every step; `play collectives` shows those all-reduces step by step."
say "That is for the next tutorials. Every command has its own help, with every option and its default; here is the one for train."
help train
say "That was the tour. Type `help` for all the commands, and try changing an option: `train m on d epochs=2 lr=0.01 opt=sgd`."
