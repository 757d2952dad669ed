# golden: keep-going=off
# A script stops at the first expect that fails, with the message, and ringside exits 1.
model m = mlp 784-16-10
expect params = 12730
expect params < 100
say "never printed: the script stopped at the check before"
