# Text data: the built-in corpus, a file, and what is refused. A text model starts with an embedding
# of token ids, so the float models here are refused with a message that says so.
set threads=1
data t = text
show t
data s = text small.txt ctx=16
show s
ls
help data

# What is refused: an empty file, a text too short for its context, a file that is not there, and
# options that belong to another source.
data e = text empty.txt
data short = text small.txt ctx=64
data n = text nosuch.txt
data z = text ctx=0
data d = digits ctx=8
data w = text n=5
data two = text small.txt small.txt

# A model of floats does not take token ids.
model m = mlp 64-32-10
train m on t steps=1
eval m on t
