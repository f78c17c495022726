"""The ``cdnaas-settings`` directive: the configuration reference, rendered from the
declaration in :mod:`cdnaas.common.settings` each time the site is built, so the page
can never drift from what the code reads.

Used in a MyST page, whose directives parse their generated content as Markdown::

    ```{cdnaas-settings}
    ```
"""
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

from cdnaas.common import settings


class SettingsTables(SphinxDirective):
    """One table per group of settings (:data:`cdnaas.common.settings.GROUPS`), in their
    declared order."""

    def run(self):
        self.env.note_dependency(settings.__file__)  # rebuilt when a setting changes
        shown = []
        for group, title in settings.GROUPS.items():
            table = nodes.container()
            self.state.nested_parse(StringList(settings.markdown_table(group).splitlines(),
                                               source=settings.__file__),
                                    self.content_offset, table)
            shown += [nodes.rubric(text=title), *table.children]
        return shown


def setup(app):
    app.add_directive("cdnaas-settings", SettingsTables)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
