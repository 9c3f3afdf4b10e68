"""Tests of loaders/: the Spark and python loads, their inputs."""
