"""The derived state summary of a channel across its messages, tasks and locks, and its
compaction (CLI "Channel state summary and compaction", REFERENCE-CLI §3.14).

- ``messages``: each message read as the reference reads its file in a synced folder, folded
  into decisions, blockers and verification evidence;
- ``summary``: the summary object with the reference's JSON keys; ``markdown``: its markdown,
  byte for byte the reference's ``state`` output;
- ``selectors``: ``state_summary``, ``latest_snapshot``; ``services``: ``state_compact``;
- ``api``: the REST views.
"""
