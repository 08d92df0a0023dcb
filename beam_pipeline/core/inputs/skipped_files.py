"""Which files found by listing a folder or a glob are skipped rather than checked as images: what
an operating system, a sync tool or a labelling tool leaves beside the photos.

A folder copied from a Mac holds .DS_Store and ._* files (AppleDouble: a resource fork, named
like the photo it belongs to), one from Windows Thumbs.db and desktop.ini, a labelled set its
.txt, .xml or .json labels, a repository its .git/. Checked as images, each would be rejected
as not_image and charged to the error budget: eight beside twenty photos fail the run. Skipped,
each is still listed (errors file, reason skipped) and counted, but no error.

A file with an image's extension that does not decode stays an error, and so does a file with
no extension or one not listed here: cameras and scrapers write images without one. A manifest
names its files on purpose, so its rows are never skipped.
"""
import posixpath
from typing import Optional

# Files an operating system writes into folders, by lowercased name.
SYSTEM_FILES = {'.ds_store': 'a macOS Finder file', '.localized': 'a macOS Finder file',
                'icon\r': 'a macOS folder icon', 'thumbs.db': 'a Windows thumbnail cache',
                'ehthumbs.db': 'a Windows thumbnail cache', 'ehthumbs_vista.db': 'a Windows thumbnail cache',
                'desktop.ini': 'a Windows folder settings file'}
# Folders of files that belong to the system, not to the collection, by lowercased name.
SYSTEM_FOLDERS = {'__macosx': 'macOS zip archives add', '@eadir': 'Synology NAS thumbnails',
                  '$recycle.bin': 'the Windows recycle bin', 'system volume information': 'Windows'}
# Extensions of files that are clearly no image: text, labels and annotations, documents, data,
# code, archives, models, audio and video, photo sidecars.
NOT_IMAGE_EXTENSIONS = frozenset('''
    txt csv tsv json jsonl ndjson xml md rst html htm yaml yml toml ini cfg conf log pbtxt
    pdf doc docx xls xlsx ppt pptx odt ods rtf
    db sqlite sqlite3 parquet pkl pickle npy npz h5 hdf5 tfrecord idx pb pt pth ckpt onnx keras
    py ipynb sh bat js css
    zip tar gz tgz bz2 xz 7z rar
    mp3 wav aac m4a flac ogg mp4 mov avi mkv webm m4v wmv 3gp
    xmp aae url lnk exe dll
    svg svgz eps ps ai mo po pot
'''.split())
# Files a project or a package keeps beside its images, named without an extension: text, by
# their names (a file of another name without one may be an image a camera or a scraper wrote).
TEXT_FILE_NAMES = frozenset('''
    authors copying license licence readme changelog changes news notice install todo contributors
    maintainers makefile version
'''.split())


def skip_reason(relative: str) -> Optional[str]:
  """Why the file at ``relative`` (its '/'-separated path below the folder listed) is skipped,
  or None to check it as an image: it lies in a hidden or system folder, it is a hidden file (a
  macOS ._* resource fork too) or a system file, or its extension is no image's."""
  *folders, name = relative.split('/')
  for folder in folders:
    if folder.startswith('.') and folder not in ('.', '..'):
      return f'in the hidden folder {folder}/'
    if folder.lower() in SYSTEM_FOLDERS:
      return f'in {folder}/ ({SYSTEM_FOLDERS[folder.lower()]})'
  if name.lower() in SYSTEM_FILES:
    return SYSTEM_FILES[name.lower()]
  if name.startswith('._'):
    return 'a macOS resource fork (AppleDouble), no image'
  if name.startswith('.'):
    return 'a hidden file'
  stem, extension = posixpath.splitext(name)
  extension = extension[1:].lower()
  if extension in NOT_IMAGE_EXTENSIONS:
    return f'no image, by its extension (.{extension})'
  if stem.lower() in TEXT_FILE_NAMES and extension in ('', 'md', 'rst', 'txt'):
    return f'no image, by its name ({name}: a text file of a project)'
  return None
