"""EventCloud: a distributed publish/subscribe system and store for RDF events."""

from eventcloud.rdf.model import IRI, CompoundEvent, Literal, Quad, Term

__all__ = ["IRI", "Literal", "Quad", "Term", "CompoundEvent"]
__version__ = "0.1.0"
