"""A local S3: moto's server in a thread of the test process, one bucket per test."""

from __future__ import annotations

import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from moto.server import ThreadedMotoServer

from ujobs.exports.sinks import ObjectStoreSink, reset_default_sink, s3_sink


@dataclass(frozen=True)
class LocalS3:
    endpoint: str

    def bucket(self) -> str:
        """A new empty bucket (moto takes an unsigned PUT)."""
        name = f"exports-{uuid.uuid4().hex[:12]}"
        request = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200
        return name

    def sink(self, bucket: str) -> ObjectStoreSink:
        return s3_sink(
            bucket,
            endpoint=self.endpoint,
            region="us-east-1",
            access_key_id="testing",
            secret_access_key="testing",
            allow_http=True,
        )


@pytest.fixture(scope="session")
def local_s3() -> Iterator[LocalS3]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield LocalS3(endpoint=f"http://{host}:{port}")
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _no_default_sink() -> Iterator[None]:
    reset_default_sink()
    yield
    reset_default_sink()
