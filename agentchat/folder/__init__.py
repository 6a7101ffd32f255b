"""The canonical markdown folder (DESIGN §8), filled by the sync issue; nothing here yet.

It will hold three parts: ``render`` — pure functions from a record (message, cursor, task,
claim, lock, the state summary) to ``(path, bytes)``, byte for byte as the reference CLI writes
them (REFERENCE-CLI §3), built on the apps' ``records`` modules; ``sync`` — writes what changed
(compare bytes, temp sibling + ``os.replace``), deterministic and incremental, optionally
following live and committing to git; ``import`` — validates a folder the reference CLI wrote,
then loads it in one transaction or refuses it whole. Their commands go in
``agentchat/management/commands/``.
"""
