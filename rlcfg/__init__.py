"""rlcfg: a compiler and command line for LLM reinforcement-learning post-training configs."""

__version__ = "0.1.0"
