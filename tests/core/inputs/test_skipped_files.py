"""The files a folder or glob input skips as no images, by their place and name alone."""
import pytest

from beam_pipeline.core.inputs import skipped_files


@pytest.mark.parametrize('relative, reason', [
    ('.DS_Store', 'a macOS Finder file'),
    ('cat/._1.jpg', 'a macOS resource fork (AppleDouble), no image'),
    ('cat/Thumbs.db', 'a Windows thumbnail cache'),
    ('THUMBS.DB', 'a Windows thumbnail cache'),
    ('dog/desktop.ini', 'a Windows folder settings file'),
    ('cat/.hidden.jpg', 'a hidden file'),
    ('.git/objects/ab/cdef', 'in the hidden folder .git/'),
    ('cat/.thumbnails/1.jpg', 'in the hidden folder .thumbnails/'),
    ('__MACOSX/cat/._1.jpg', 'in __MACOSX/ (macOS zip archives add)'),
    ('cat/@eaDir/1.jpg/SYNOPHOTO_THUMB_XL.jpg', 'in @eaDir/ (Synology NAS thumbnails)'),
    ('notes.txt', 'no image, by its extension (.txt)'),
    ('labels/1.XML', 'no image, by its extension (.xml)'),
    ('instances.json', 'no image, by its extension (.json)'),
    ('cat/list.csv', 'no image, by its extension (.csv)'),
    ('README.md', 'no image, by its extension (.md)'),
    ('IMG_0001.MOV', 'no image, by its extension (.mov)'),
    ('icons/logo.svg', 'no image, by its extension (.svg)'),  # a vector drawing: no raster image
    ('locale/de/LC_MESSAGES/app.mo', 'no image, by its extension (.mo)'),
    ('AUTHORS', 'no image, by its name (AUTHORS: a text file of a project)'),
    ('pkg/COPYING', 'no image, by its name (COPYING: a text file of a project)'),
    ('License', 'no image, by its name (License: a text file of a project)'),
])
def test_system_hidden_and_clearly_other_files_are_skipped_saying_why(relative, reason):
  assert skipped_files.skip_reason(relative) == reason


@pytest.mark.parametrize('relative', [
    'cat/1.jpg', 'cat/1.JPEG', 'dog/2.png', 'scan.tiff', 'icon.ico', 'photo.webp', 'anim.gif',
    'IMG_0001',  # no extension: cameras and scrapers write images without one
    'download.php', 'photo.jpg_large', 'x.raw', 'AUTHORS.jpg',  # an unknown extension, or an image that may not decode
    'cat.12.jpg', 'a..b.jpg', 'v1.0/1.jpg',  # dots inside names, not at their start
])
def test_images_and_unknown_files_are_checked(relative):
  assert skipped_files.skip_reason(relative) is None
