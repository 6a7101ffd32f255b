"""Live delivery's plumbing: the doorbell rung on commit, the layer, the socket's back pressure.

Live delivery spans these files (subscribe, read the database, await a ring; a ring is only a
doorbell, what is delivered is always read back by seq):

==========================================  ==================================================
``agentchat/core/live/push.py``             rings a channel-layer group once the writing
                                            transaction has committed; the home event loop
``agentchat/core/live/layer.py``            the one place that knows the channel layers'
                                            internals (free an inbox, who is in a group)
``agentchat/core/live/transport.py``        websocket write flow control: is the client
                                            keeping up (daphne's Twisted transport)
``agentchat/core/identity/revocation.py``   revoked tokens and ended sessions end live
                                            connections: ``credential_watch``, the
                                            revocations group, ``credential_live``
``channels_app/services/``                  the writes that ring (``push_on_commit`` with the
                                            channel's group, an inbox's and the monitor's:
                                            ``services/groups.py``)
``channels_app/live.py``                    the wait and the stream as plain async functions,
                                            free of ASGI
``channels_app/endpoints/``                 the thin ASGI endpoints: wait long-poll
                                            (``wait``), one channel's websocket
                                            (``stream``), many channels on one
                                            (``multiplex``), their plumbing (``shared``)
``channels_app/routing.py``                 the websocket routes
``agentchat/asgi.py``                       routes wait, the API lane and websockets before
                                            Django; sets the home loop and the raw send
==========================================  ==================================================

(``agentchat/folder/follow.py`` frees its inbox through ``layer`` too.)

What belongs here: what live delivery needs below any agent or channel: the ring, the layer
adapter, the transport adapter. May import: ``rules``, ``db``, Channels, asgiref, Django's
transaction hooks. Not ``identity`` nor ``http``, which stand above (revocation, an identity
matter, uses this package), nor the floor's models (a contract in pyproject.toml).
"""
