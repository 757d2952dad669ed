# Tensor parallelism: from the lecture's matrix example to a split MLP and GPT, on real ranks.
# Play it with `play tensor` (pause waits for Enter), `play tensor auto` or `play tensor step`.

say "Data parallelism copies the whole model to every rank. Tensor parallelism splits each weight matrix instead, so every rank holds and computes only a slice, and the ranks combine their slices where a whole tensor is needed. It starts with one matrix product."
say "The lecture's example: A (2x4) times B (4x2). Split B by columns and each rank computes some columns of Y; an all_gather sets them side by side. Split the inner dimension (A's columns, B's rows) and each rank computes a whole-size partial product; an all_reduce adds them. Every rank prints its part and the result, checked against the serial product."
tp matmul ranks=2
pause

say "The row split works for any number of ranks that divides the inner dimension: four partial products, one all_reduce."
tp matmul ranks=4 split=rows k=8
pause

say "Megatron-LM puts the two splits in a row. In an MLP, the first linear is split by columns: each rank computes half of the hidden units and applies relu to them alone, since relu works element by element. The second linear is split by rows: each rank's half of the hidden units makes a partial sum of the outputs, and one all_reduce adds them. One all-reduce in forward, and its mirror image in backward."
data d = digits n=6000
model one = mlp 784-256-10 seed=1
model two = mlp 784-256-10 seed=1
train one on d batch=64 epochs=1
pause

say "The same model and data on two ranks with mode=tensor. Each rank starts from its slice of the same initial weights, so it must end with the weights one process reaches: watch the test accuracy. The memory table shows each rank holding about half of the parameters, measured at the allocator, beside the formula 4(R + S/tp + b): R replicated parameters, S split ones, b the biases of the row-split linear, which rank 0 alone adds."
train two on d mode=tensor ranks=2 batch=64 epochs=1 view=off
expect steps = 94
expect accuracy > 0.8
say "Each rank holds half of the model's 814 KB of parameters:"
expect memory.parameters per rank ~= 407000 within 1%
expect memory.parameters per rank ~= formula within 1%
pause

say "In a GPT, attention splits by heads: the query, key and value projection is split by columns (each rank takes the columns of its heads), attention runs on those heads unchanged, and the output projection is split by rows. The MLP half of each block splits as above. Layer norms, embeddings and the head are copied to every rank."
data t = text ctx=32
model g = gpt layers=2 heads=4 dim=64 ctx=32
show g
train g on t mode=tensor ranks=2 steps=40 batch=16 opt=adamw lr=3e-3 eval=off view=off
say "Every all-reduce went to the session log. Per step and rank: 2 layers x 2 split pairs x (forward + backward) = 8, each of batch x context x width floats."
sql "SELECT rank, step, count(*) AS all_reduces, sum(bytes) AS bytes FROM events WHERE run_id = (SELECT max(id) FROM runs) AND kind = 'phase' AND name = 'comm' AND chunk >= 0 AND json_extract(detail, '$.op') = 'all_reduce' GROUP BY rank, step ORDER BY step, rank LIMIT 4"
pause

say "tp= combines tensor and data parallelism: ranks=4 tp=2 makes two tensor-parallel pairs of ranks, and the pairs split each batch between them, averaging their gradients as DDP does."
model q = mlp 784-256-10 seed=1
train q on d mode=tensor ranks=4 tp=2 batch=64 epochs=1 view=off
expect world = 4
expect memory.parameters per rank ~= formula within 1%
say "Try `help tp`, `train ... mode=tensor backend=tcp`, or a model tensor parallelism cannot split evenly, such as mlp 784-255-10, to see why."
