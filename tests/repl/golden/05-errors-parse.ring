# Errors found while reading a command, each with the line, a caret under the word and, for a near
# miss, a suggestion. Run with --keep-going, so every line is tried; none of them changes the session.
set threads=1
model m = mlp 784-32-10
data d = digits n=600

# Commands: a near miss, an unknown word, a binding with no command.
trian m on d
fly m
x = 3

# Options: a near miss, an unknown one, one given twice, no value, a command with none.
train m on d epochz=2
train m on d speed=2
train m on d epochs=1 epochs=2
train m on d epochs=
ls all=1

# Values: not a number, not an integer, not one of the choices (with and without a near miss), not a
# boolean.
train m on d epochs=two
train m on d lr=fast
train m on d epochs=1.5
train m on d opt=adamm
train m on d opt=rmsprop
train m on d sched=cosin
train m on d eval=maybe
eval m on d split=val
set threads=abc

# Names: a near miss, unknown ones, a data set where a model goes and the other way round.
train mm on d
train m on dd
eval zebra on d
show zz
drop nosuch
train d on d
train m on m
save d d.safetensors
predict d on d

# Arguments: missing, a wrong keyword, one too many.
train m on
train
train m in d
export sesion 1 out.ring
compare 1
compare a b
say
ls extra
version now

# Bindings: no name, no '=', nothing after it, a name that is a command or not a name.
model = mlp 784-10
model m mlp 784-10
model m =
data e =
model help = mlp 784-10
model 1x = mlp 784-10

# Model specs: the caret goes under the layer or size it could not use.
model bad = mlp 784-256x-10
model c = seq conv(16,3,pad=1) relux maxpool(2) flatten linear(10)
model c = seq conv(16,3,padd=1) relu
model c = seq conv(16,3,pad=1) relu maxpool(2) flatten linear(10

# Data sources: a near miss, an unknown one, files where none go, too few files.
data e = digitz
data e = mnist
data e = digits n=1 extra
data e = idx a

# Nothing above changed the session.
ls

# An abbreviation of one choice, and the built-in data set, get a suggestion.
collective reduce ranks=2 op=prod
train m on digit
