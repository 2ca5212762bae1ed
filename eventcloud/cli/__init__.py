from eventcloud.cli.main import main

__all__ = ["main"]
