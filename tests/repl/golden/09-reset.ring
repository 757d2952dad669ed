# Training again continues from the model's weights, and says so; `reset` puts the initial weights
# back (the same accuracy as before any training, and the same first training again).
set threads=1
data d = digits n=1200 seed=1
model m = mlp 784-32-10 seed=3
eval m on d
train m on d epochs=1 batch=64
train m on d epochs=1 batch=64
eval m on d
reset m
eval m on d
train m on d epochs=1 batch=64
reset d
reset nosuch
model m = mlp 784-16-10 seed=3
train m on d epochs=1 batch=64
