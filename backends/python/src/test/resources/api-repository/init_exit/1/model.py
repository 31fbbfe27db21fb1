# Parses its command line like a script would (it sees Triton's, not the stub's), then exits in initialize.
import argparse
import sys


class TritonPythonModel:
    def initialize(self, args):
        argparse.ArgumentParser().parse_args()
        sys.exit("initialize gave up")

    def execute(self, requests):
        return None
