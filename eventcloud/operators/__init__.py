"""Operators shipped with EventCloud (pluggable FILTER functions), registered under the
`eventcloud.operators` entry-point group: geographic tests on WGS84 points (`city`) and a
deliberately expensive text similarity (`text`). Each module exposes `OPERATORS`, a tuple of
`Operator`."""
