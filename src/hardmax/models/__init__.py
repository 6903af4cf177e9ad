"""Models built from attention layers.

    classifier.py   `HardmaxClassifier`: word embedding → the one attention layer `layers` times → mean →
                    linear decoder (the paper's Section 4 model), and its `ModelConfig`

A new model is a new file here that runs its layers through `hardmax.dynamics` (so that what is trained
is what the theory analyses) and returns a `hardmax.dynamics.Trajectory` from its `trace` method.
"""

from hardmax.models.classifier import HardmaxClassifier, ModelConfig, ModelTrace

__all__ = ["HardmaxClassifier", "ModelConfig", "ModelTrace"]
