# placeholder model file for repository tests
