"""The EventCloud peer daemon: trio runtime, overlay membership and per-peer stores."""
