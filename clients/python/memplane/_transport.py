"""The transports and client bases of both kinds of client: the asyncio ones are written in
_aio_transport.py, and the blocking ones generated from them (scripts/gen_sync_client.py)."""
from ._aio_transport import AsyncClientBase, AsyncTransport
from ._channel import CallSettings, channel_target
from ._sync_transport import SyncClientBase, SyncTransport

__all__ = ["AsyncClientBase", "AsyncTransport", "CallSettings", "SyncClientBase", "SyncTransport", "channel_target"]
