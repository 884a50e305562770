"""The WSGI entry point for gunicorn: ``gunicorn api.wsgi:app``.

Each worker builds its app here. ``pitboss serve`` resolves the database once beforehand and
hands it to the workers as ``DATABASE_URL``, so the embedded server is started only once.
"""

from __future__ import annotations

import logging
import os

from api.app import create_app, log_through
from api.secrets_files import load_shoe_key

log_through(logging.getLogger("gunicorn.error"))
# The shoe key now, so a worker without it fails to boot instead of failing the first deal.
app = create_app({"SHOE_KEY": load_shoe_key(os.environ)})
