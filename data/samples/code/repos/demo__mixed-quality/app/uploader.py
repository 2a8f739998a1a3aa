"""Upload files to the demo bucket, retrying with exponential backoff (written for the cidermill demo)."""

import time

from .settings import upload_url


def upload(session, name: str, data: bytes, *, retries: int = 3) -> str:
    """PUT `data` under `name`; returns the URL. Retries transient failures with backoff."""
    url = upload_url(name)
    delay = 0.5
    for attempt in range(retries + 1):
        response = session.put(url, data=data, timeout=30)
        if response.status_code < 500:
            response.raise_for_status()
            return url
        if attempt < retries:
            time.sleep(delay)
            delay *= 2
    raise RuntimeError(f"upload of {name} failed after {retries + 1} attempts")
