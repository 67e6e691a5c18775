"""Studies: a seed paper's experiment (or a question of our own) as one command that runs the
grid on the user's model, analyses it as the paper did, and reports our figures beside the
paper's with intervals and a verdict each (``maslab study``).

:mod:`~maslab.studies.base` defines a study, :mod:`~maslab.studies.figures` a paper's figures,
:mod:`~maslab.studies.estimates` our estimates and the verdicts, :mod:`~maslab.studies.running`
a study's directory, :mod:`~maslab.studies.report` its page; the bundled studies are in
:mod:`maslab.studies.catalogue`.
"""
