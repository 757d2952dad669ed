# Models and data sets: set, version, model (mlp, seq, blocks, options), data (digits, csv), show, ls,
# drop, quit. Everything here succeeds.
set threads=1
set
set seed=7
set seed=1 color=off
version
ls

# An MLP, with the default activation and with options.
model m = mlp 784-256-10
model g = mlp 784-64-32-10 act=gelu dropout=0.1 seed=3
show m
show g

# A CNN, and a block of layers in [ ].
model c = seq conv(8,3,pad=1) relu maxpool(2) flatten linear(10)
model b = seq in=1x28x28 [ conv(4,3,pad=1) relu ] avgpool(2) flatten layernorm linear(10)
show c
show b

# The built-in digits, a second draw of them, and a CSV file (label first).
data d = digits n=600
data e = digits n=300 seed=5
data t = csv tiny.csv
show d
show t
ls

# A model for the CSV's four features and three classes.
model p = mlp 4-8-3
show p

# drop forgets; a binding to a taken name replaces it.
drop e
drop g
model m = mlp 784-32-10
ls

# quit ends the script: the last line never runs.
quit
ls
