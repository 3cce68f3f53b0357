"""``requeue --rerun``: an output a stage's expectation set aside sends its input row back to the stage."""

from __future__ import annotations

from pydantic import BaseModel

from minikafka import Source
from minikafka.api.core.requeue import requeue_named
from minikafka.ledger.consuming import Quarantined, quarantine_in_current_transaction
from minikafka.util.clock import utc_now


class Flight(BaseModel):
    flight_id: int
    carrier: str


class Enriched(BaseModel):
    flight_id: int
    airline: str | None = None


def set_aside(src: Source, consumer: str, parent: int) -> None:
    with src.ledger.atomic() as conn:
        quarantine_in_current_transaction(conn, [Quarantined(
            "enriched", '{"flight_id": 2, "airline": null}', "failed expectation: not null(airline)", "quality",
            utc_now(), consumer=consumer, run_id="r1", row_id=parent)])


def test_requeue_rerun_makes_the_input_row_pending_for_the_stage_instead_of_appending_the_output(tmp_path):
    with Source(str(tmp_path / "l.sqlite")) as src:
        flights = src.topic("flights", Flight, dedup="flight_id")
        flights.extend([{"flight_id": 1, "carrier": "AA"}, {"flight_id": 2, "carrier": "UA"}])
        src.topic("enriched", Enriched, dedup="flight_id")
        flights.consumer("enrich")
        for record in list(flights.iter_new(records=True, consumer="enrich")):
            flights.set_handled(record=record, consumer="enrich")
        set_aside(src, "enrich", 2)
        result = requeue_named(src, "enriched", rerun=True)
        assert (result.appended, result.replayed, result.failed) == (0, 1, [])
        assert [f.flight_id for f in flights.iter_new(consumer="enrich")] == [2]
        assert src.topic("enriched", Enriched, dedup="flight_id").count() == 0 and src.quarantined("enriched") == []


def test_requeue_rerun_of_a_stage_with_several_inputs_says_to_replay_by_hand(tmp_path):
    with Source(str(tmp_path / "l.sqlite")) as src:
        src.topic("flights", Flight, dedup="flight_id").consumer("enrich")
        src.topic("weather", Flight, dedup="flight_id").consumer("enrich")
        src.topic("enriched", Enriched, dedup="flight_id")
        set_aside(src, "enrich", 1)
        result = requeue_named(src, "enriched", rerun=True)
        assert result.requeued == 0
        [(_, reason)] = result.failed
        assert "reads 2 topics" in reason and "minikafka replay" in reason
