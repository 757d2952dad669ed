# A short lesson for the golden sessions: narration, a pause, commands.
say "A lesson is a script: narration with say, a pause where the class can look, and commands."
model tiny = seq flatten linear(10)
pause
say "pause waits for Enter at a terminal. Played with auto, or with no terminal at all, it goes straight on."
show tiny
