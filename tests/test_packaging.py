"""The package DataflowRunner stages (--setup_file=./setup.py) installs, and the installed copy runs."""
import glob
import json
import subprocess
import sys
import sysconfig
import venv

from beam_pipeline.synthetic.sample_set import write_sample_set

from helpers.commands import ROOT, TIMEOUT


def _run(argv, cwd):
  done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT, check=False)
  assert done.returncode == 0, f'{argv}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}'
  return done


def test_the_source_distribution_installs_into_a_fresh_environment_and_converts(tmp_path):
  """The sdist (as Beam builds it for --setup_file) carries what setup.py reads, installs
  with pip into a new virtual environment, and that installed copy (not this checkout)
  converts the sample set. The new environment borrows this one's dependencies through a
  .pth file instead of downloading TensorFlow again."""
  _run([sys.executable, 'setup.py', '-q', 'sdist', '--dist-dir', str(tmp_path / 'dist')], ROOT)
  sdist, = glob.glob(str(tmp_path / 'dist' / '*.tar.gz'))
  _run([sys.executable, '-m', 'pip', 'wheel', '--quiet', '--no-deps', '--no-build-isolation', '--wheel-dir',
        str(tmp_path / 'wheels'), sdist], tmp_path)
  wheel, = glob.glob(str(tmp_path / 'wheels' / '*.whl'))

  venv.create(tmp_path / 'fresh', with_pip=True)
  python = str(tmp_path / 'fresh' / 'bin' / 'python')
  _run([python, '-m', 'pip', 'install', '--quiet', '--no-deps', '--no-index', wheel], tmp_path)
  site_packages = _run([python, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'], tmp_path)
  with open(f'{site_packages.stdout.strip()}/dependencies.pth', 'w', encoding='utf-8') as f:
    f.write(sysconfig.get_paths()['purelib'] + '\n')

  where = _run([python, '-c', 'import beam_pipeline; print(beam_pipeline.__file__)'], tmp_path)
  assert where.stdout.startswith(str(tmp_path / 'fresh'))
  write_sample_set(str(tmp_path / 'images'))  # the repository's generator: it does not ship in the wheel
  converted = _run([python, '-m', 'beam_pipeline', '--input=images', '--output=out', '--max_error_fraction=0.5'],
                   tmp_path)
  assert 'Wrote 83 examples' in converted.stdout
  info = json.loads((tmp_path / 'out' / 'beam_pipeline.json').read_text())
  assert info['num_examples'] + info['num_errors'] + info['num_skipped'] == 86
