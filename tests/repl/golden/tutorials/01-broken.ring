# A tutorial whose second check is wrong: playing it stops there and says why.
set seed=9
model m = mlp 784-16-10
expect params = 12730
expect params = 12731
say "never printed: the tutorial stopped at the check before"
