"""The dataset readers, one module each, registered by name in the retrieval or classification registry (or both).

A module here registers its reader with :func:`~fdsml.data.retrieval_datasets.register_reader` or
:func:`~fdsml.data.classification_datasets.register_classification_reader` in its own file; the
registries find every module of this folder, and every entry point of group ``fdsml.datasets``
(:mod:`fdsml.plugins`, docs/plugins.md). Nothing imports a reader by name: its code enters the
fingerprints of the runs that read its dataset, and of no other.
"""
