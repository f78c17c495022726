"""The ``openapi-info`` directive: an OpenAPI document's ``info.description``, rendered
from the file as the site is built (sphinxcontrib-openapi renders the paths only).

Used in a MyST page, whose directives parse their content as Markdown (the
descriptions in ``api-spec/`` are Markdown)::

    ```{openapi-info} ../../api-spec/api.yaml
    ```
"""
import yaml
from docutils.statemachine import StringList
from docutils import nodes
from sphinx.util.docutils import SphinxDirective


class OpenApiInfo(SphinxDirective):
    """The description of the OpenAPI document named by the argument (relative to the
    page, or to the site's root with a leading ``/``)."""

    required_arguments = 1

    def run(self):
        relative, path = self.env.relfn2path(self.arguments[0], self.env.docname)
        self.env.note_dependency(relative)
        with open(path, encoding="utf-8") as document:
            description = (yaml.safe_load(document).get("info") or {}).get("description", "")
        shown = nodes.container()
        self.state.nested_parse(StringList(description.splitlines(), source=path),
                                self.content_offset, shown)
        return shown.children


def setup(app):
    app.add_directive("openapi-info", OpenApiInfo)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
