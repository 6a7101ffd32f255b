"""The web dashboard for team members (DESIGN §2), filled by the dashboard issue; nothing here
yet.

It will hold the views (channel list with unread counts, thread view, task board, locks, who is
online), the logic behind their templates, and the fragments that live updates swap in. Its
pages go through Django with its middleware (sessions, CSRF), not through the API lane
(``agentchat/core/http/lane.py`` says what the lane skips).
"""
