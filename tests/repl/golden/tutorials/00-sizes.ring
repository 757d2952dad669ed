# Two models and their sizes: a tutorial the golden tests play (not one of tutorials/).
set threads=1 seed=5
say "A small MLP first."
model m = mlp 784-16-10
expect params = 12730
expect layers = 3
model c = seq conv(4,3,pad=1) relu maxpool(2) flatten linear(10)
expect params = 7890
