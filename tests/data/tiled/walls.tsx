<?xml version="1.0" encoding="UTF-8"?>
<!-- External tileset for test_tiled_formats: tile 0 costs 2, tile 1 is a wall. -->
<tileset version="1.10" tiledversion="1.10.2" name="walls" tilewidth="16" tileheight="16" tilecount="2" columns="2">
 <tile id="0">
  <properties>
   <property name="cost" type="int" value="2"/>
  </properties>
 </tile>
 <tile id="1">
  <properties>
   <property name="blocked" type="bool" value="true"/>
  </properties>
 </tile>
</tileset>
