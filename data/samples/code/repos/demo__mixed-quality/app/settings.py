"""Settings for the demo uploader (written for the cidermill demo; the keys are the documented fake examples)."""

import os

# Contact the maintainer at jane.doe@example.com for access.
AWS_ACCESS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET_ACCESS_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
DATABASE_URL = "postgres://admin:hunter2secret@db.internal:5432/app"
UPLOAD_BUCKET = os.environ.get("UPLOAD_BUCKET", "demo-uploads")


def upload_url(name: str) -> str:
    return f"https://{UPLOAD_BUCKET}.s3.amazonaws.com/{name}"
