"""The work-queue handler the docs use: `minikafka work examples.myjobs:summarise --queue rss.summarise`."""

from pydantic import BaseModel


class Summarise(BaseModel):
    url: str
    body: str


def summarise(job: Summarise) -> None:
    if not job.body:
        raise ValueError(f"{job.url}: empty body")  # retried with backoff, then dead-lettered
    print(job.url, "->", job.body[:40])  # call your local LLM here
