# Without --keep-going a script stops at its first error and exits with status 1.
# golden: keep-going=off
set threads=1
model m = mlp 784-32-10
train m on nosuch
say "never printed: the script stopped at the line above"
