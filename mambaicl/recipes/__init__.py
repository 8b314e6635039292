"""Reusable trainings and their inputs: the layer between the engine (:mod:`mambaicl.train`) and the experiments.

Data flows one way: ``train`` -> ``recipes`` -> ``experiments``. An experiment imports recipes, never another
experiment; ``analysis`` and ``viz`` import neither.

==================  ===========================================================================================
``base``            the protocol every preset and result builds on (:class:`Preset`, :class:`Result`,
                    ``resolve_seeds`` / ``resolve_device``: a seed tuple is checked where it enters)
``presets``         presets shared by several experiments (Figure 2's, the mechanism chapter's, Chapter 3's,
                    App. 14's)
``fig2``            Figure 2's trained models (:func:`~mambaicl.recipes.fig2.trained_models`) and their sweep
``mechanism``       a seed's runs of the mechanism preset (:func:`~mambaicl.recipes.mechanism.seed_runs`), its
                    step-size search, the deep stacks' validation loss
``dynamics``        Chapter 3's seed stacks of several settings and the counts read from their curves
``learn``           Part I's illustrative one-layer Mamba and linear Transformer
                    (:func:`~mambaicl.recipes.learn.illustrative_pair`)
``sst2``            Chapter 6's trainings until the validation loss stops improving
``stepsize``        the one step-size search and its one result type (:class:`StepSizeSearch`), search seeds,
                    recorded searches
``validation``      the one way to build validation prompts (synthetic and SST-2)
==================  ===========================================================================================

The result store (:mod:`mambaicl.experiments.store`) stays with the experiments: it caches whole experiment
results for the chapters, which is the experiments' business, not a training's.
"""
