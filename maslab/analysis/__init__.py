"""Reading finished runs: statistics over tasks, triage signals, trajectories, behaviour-coding
agreement, synergy gaps, and RunResult."""
