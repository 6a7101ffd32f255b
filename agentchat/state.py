"""The derived state summary of a channel across its messages, tasks and locks (CLI "Channel
state summary and compaction"); filled by the state summary work of issue 10."""
