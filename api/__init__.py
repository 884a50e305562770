"""The HTTP adapter and command line: create_app, blueprints, schemas, error mapping."""
