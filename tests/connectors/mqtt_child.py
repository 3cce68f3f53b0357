"""A process running an MQTTSource into a ledger until it is killed (for the kill -9 tests).

``python -m tests.connectors.mqtt_child LEDGER URL [--crash-on-ack]``: prints ``ready``
once subscribed, then ``received R appended A`` whenever the counts change. With
``--crash-on-ack`` the process sends itself SIGKILL at its first acknowledgement to the
broker, which the source sends only after the transaction that stored the messages
committed: a crash between the commit and the ack.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from pydantic import BaseModel

from minikafka import Source
from minikafka.connectors import MQTTSource


class Reading(BaseModel):
    n: int


def main() -> None:
    ledger, url = sys.argv[1:3]
    if "--crash-on-ack" in sys.argv:
        import paho.mqtt.client as mqtt

        mqtt.Client.ack = lambda self, mid, qos: os.kill(os.getpid(), signal.SIGKILL)
    with Source(ledger) as source:
        topic = source.topic("readings", Reading, dedup=("n",))
        src = MQTTSource(url, "sensors/#")
        handle = topic.attach(src)
        if not src.ready.wait(15):
            sys.exit(f"not subscribed: {handle.error}")
        print("ready", flush=True)
        seen = None
        while handle.running:
            counts = (src.received, src.appended)
            if counts != seen:
                print(f"received {counts[0]} appended {counts[1]}", flush=True)
                seen = counts
            time.sleep(0.01)
        sys.exit(f"the source stopped: {handle.error}")


if __name__ == "__main__":
    main()
