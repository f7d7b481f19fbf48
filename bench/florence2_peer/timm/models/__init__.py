# timm.models stand-in (see timm/__init__.py)
