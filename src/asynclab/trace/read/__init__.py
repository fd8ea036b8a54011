"""Reading a profiler trace into a Trace: the event model (events), interval arithmetic (intervals), reading files (io),
the event table (table), one file into a Trace (file), one file per rank (ranks), and the Trace itself (model)."""
