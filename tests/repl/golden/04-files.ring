# Files and playback: save, load, export session, play (modes), say, pause. The setup session (files/
# first-session.ring) is session 1 of this log, so this script is session 2.
# golden: setup=first-session.ring
# golden: cat=first.ring
# golden: cat=second.ring
set threads=1
model m = mlp 784-32-10
data d = digits n=600
train m on d steps=5 eval=off
eval m on d

# Weights go out as safetensors and come back into a model of the same shape.
save m m.safetensors
model m2 = mlp 784-32-10
eval m2 on d
load m2 m.safetensors
eval m2 on d
load m m.safetensors

# Narration: wrapped at the terminal's width (80 here), a blank line where the text has one.
say "Short."
say "A longer sentence of narration that runs past the width of the terminal, so that say has to wrap it onto a second line and then a third one, each starting with a bar."
say "Two paragraphs.\n\nThe second one, after a blank line."
pause

# Lessons: interactive (pause waits only at a terminal), auto, step (asks only at a terminal).
play lesson.ring
play lesson.ring auto
play lesson.ring step
play lesson.ring mode=auto
ls

# A past session, and this one so far, written out as scripts (shown after the run).
export session 1 first.ring
export session 2 second.ring
play first.ring
