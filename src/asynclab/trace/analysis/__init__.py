"""What a Trace says: metrics, idle stretches and their causes (idle), collectives, the replay of a step and its
what-ifs (replay, whatif, savings), and the diagnosis of a step (diagnose, findings)."""
